"""What the agent reads and writes: the taxonomy, actions (parse / format / frames), prompts and rewards."""
