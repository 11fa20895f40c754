"""Shipped GLUE recipes (YAML): glue_recipe.py reads them."""
