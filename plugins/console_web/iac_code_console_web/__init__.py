"""A web console for the iac-code A2A server, served at ``/console`` (plain ES modules and CSS, no build step)."""
