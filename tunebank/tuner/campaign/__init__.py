"""The campaign room: several models on several chips, from the command line or a campaign file."""
