"""Policies: built-in presets and local Hugging Face folders."""
