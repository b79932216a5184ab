"""attncli: attention for sequence-to-sequence models, and a terminal that shows every step.

This package must import without TensorFlow, so `attncli --help` starts instantly; modules
that need TensorFlow import it themselves.
"""

__version__ = "0.1.0"
