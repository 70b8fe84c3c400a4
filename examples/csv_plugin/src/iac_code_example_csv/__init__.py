"""An example iac-code plugin: ``text/csv`` input parts, a router for CSV prompts, a CSV preview route."""
