"""Redis Streams push-notification queue."""
