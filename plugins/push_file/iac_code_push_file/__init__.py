"""Local-file push-notification queue."""
