"""Sequence-to-sequence tasks (SCAN, COGS, your own TSV pairs) as decoder-only language modelling."""

from anchorlab.tasks.seq2seq.encoding import Vocab, decode, encode_pairs, exact_match, masked_lm_loss, token_accuracy
from anchorlab.tasks.seq2seq.task import PairsTask, PairsTaskConfig, Seq2SeqData, Seq2SeqTask, Seq2SeqTaskConfig

__all__ = ["Vocab", "decode", "encode_pairs", "exact_match", "masked_lm_loss", "token_accuracy", "PairsTask",
           "PairsTaskConfig", "Seq2SeqData", "Seq2SeqTask", "Seq2SeqTaskConfig"]
