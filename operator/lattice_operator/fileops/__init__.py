"""FileOps (triflow.fileops.v1) executed in a sprite: path confinement, the apply_patch
format, the TriFlow state operations, the response, and the executor over the backend port."""
