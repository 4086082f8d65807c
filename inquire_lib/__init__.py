"""Inquire workbench: train and study mobile GUI agents that ask a human before they act."""
__version__ = "0.1.0"
