"""The vocabulary of provenance: which source a recipe value or a manifest row comes from."""

# Where a value comes from: tag -> what it names. One vocabulary for every recipe and manifest row;
# a value the sources disagree on, or leave open, is `neobench` with a note saying what each does.
SOURCES = {
    "paper": "NeoBERT paper (Le Breton et al., TMLR 2025, arXiv 2502.19587)",
    "authors-code": "NeoBERT authors' code (github.com/chandar-lab/NeoBERT, commit ed75b68)",
    "modernbert-paper": "ModernBERT paper (Warner et al., arXiv 2412.13663), 3.1.2 and app. E.2",
    "bert24-code": "ModernBERT's retrieval script, AnswerDotAI/bert24 examples/train_st.py",
    "ettin-paper": "Ettin paper (Weller et al., arXiv 2507.11412)",
    "ettin-code": "Ettin's retrieval script, JHU-CLSP/ettin-encoder-vs-decoder "
    "retrieval_eval/train_st.py",
    "neobench": "neobench's decision where the sources are silent, broken or disagree",
}
