"""Gepard: streaming text-to-speech for real-time voice agents."""

__version__ = "0.1.0"
