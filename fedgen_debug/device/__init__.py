"""What runs on a device before anything leaves it (ARCHITECTURE.md: device/): canary insertion so
far; the bug injectors (`fedgen_debug.bugs`) belong here too."""
