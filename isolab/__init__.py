"""isolab: where should RL post-training compute go?"""

__version__ = "0.1.0"
