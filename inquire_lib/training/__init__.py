"""Models and the training stages: base agent, SFT, action-level GRPO, task-level GRPO, checkpoint choice."""
