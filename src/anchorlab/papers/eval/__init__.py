"""The papers' judgement (the cell, its lr readings, the fitted reading, the contrast: :mod:`.judgement`), the op-set
crossing, the gamma x wd grid and the journal's cells."""
