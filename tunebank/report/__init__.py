"""``bank report``: a bank gathered into what its page shows (:mod:`report.gather`), and the
page itself, one self-contained HTML file (:mod:`report.html`) with inline SVG charts
(:mod:`report.svg`). It reads the bank through :class:`bank.Bank` alone."""
