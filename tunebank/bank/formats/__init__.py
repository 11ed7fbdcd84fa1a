"""File formats the bank reads and writes: AOE's result files and bank tree, JSON Lines, CSV."""
