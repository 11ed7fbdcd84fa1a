"""CSV cells a spreadsheet opens as text, never as a formula.

A cell that starts with ``=``, ``+``, ``-`` or ``@`` is a formula to Excel, LibreOffice and
Google Sheets, and tab and CR start one too after some imports; a bank's names and origins come
from other people's files, so ``=HYPERLINK("http://...")`` may be among them. As OWASP's CSV
Injection page recommends, such a cell gets a leading ``'``, which the spreadsheet shows as
text. Numbers tunebank wrote itself (``-2.5``) are left alone; ``--raw`` writes every cell as
the bank holds it.
"""

from __future__ import annotations

import csv
from typing import IO, Any

from tunebank.bank.names import one_line

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(text: str) -> str:
    """``text`` as a spreadsheet shows it and a terminal prints it: a leading ``'`` if it would
    start a formula, control characters made visible."""
    return ("'" if text.startswith(FORMULA_STARTS) else "") + one_line(text)


def csv_writer(handle: IO[str]) -> Any:
    """The CSV writer every CSV output uses: RFC 4180's CRLF line ends, so that a field holding
    a CR or an LF is quoted too (with ``\\n`` ends, Python's writer leaves a bare CR unquoted,
    and a reader splits the row there)."""
    return csv.writer(handle, lineterminator="\r\n")
