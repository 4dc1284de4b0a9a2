"""Language modelling on real text (journal Fig. 7D): corpora, tokenizer, packed sequences, perplexity.

Modules: :mod:`.config` (``task.name: lm``), :mod:`.corpus` (local corpora and
SlimPajama shards, splitting and mixing), :mod:`.tokenizer`, :mod:`.data`
(token streams, cache, manifest), :mod:`.task` (the Task protocol).
"""
