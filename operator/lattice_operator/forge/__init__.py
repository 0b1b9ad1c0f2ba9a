"""GitHub as the human-in-the-loop substrate: the pure decisions about the forge (a sprite's
branch checked before it is pushed, what a forge action does, idempotency keys)."""
