"""reasoning-rl: verifier-centric reinforcement learning for reasoning models.

Importing this package is light (no torch); trainers, models and engines import
torch when used.
"""
__version__ = "0.1.0"
