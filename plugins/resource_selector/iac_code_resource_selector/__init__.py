"""The cloud resource selector (§9 of the 0.16 digest): ``select_cloud_resource`` pauses a turn until the user
picks a cloud resource, with a durable checkpoint per selection."""
