"""attncli: attention for sequence-to-sequence models, step by step."""
