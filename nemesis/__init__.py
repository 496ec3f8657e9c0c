"""nemesis package."""
