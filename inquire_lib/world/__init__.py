"""The offline phone world: apps and screens, task templates, a renderer, PhoneEnv and its expert."""
