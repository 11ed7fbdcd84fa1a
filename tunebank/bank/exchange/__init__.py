"""The exchange room: other people's files and banks brought in (import, merge) and the bank's
content taken out or compared (export, diff)."""
