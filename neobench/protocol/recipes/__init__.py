"""The shipped recipes, as data: one YAML file each, every value tagged with its source."""
