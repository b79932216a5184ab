"""attncli: attention for sequence-to-sequence models, and a terminal that shows every step.

Importing the package is cheap: TensorFlow is imported by the commands that need it.
"""
