"""The papers' judgement: the cell, the lr readings, the contrast, the crossing, the gamma x wd grid and the journal's cells."""
