"""The columns of the paper's Table 4 layout, named once for every report."""

AVG = "Avg."  # the plain mean over the tasks, as the paper computes it
MEAN_TYPES = "Mean(TaskType)"
ZERO_SHOT = "Zero-shot"
SHORT = {
    "Classification": "Class.",
    "Clustering": "Clust.",
    "PairClassification": "PairClass.",
    "Reranking": "Rerank.",
    "Retrieval": "Retr.",
    "STS": "STS",
    "Summarization": "Summ.",
}
TYPE_ORDER = tuple(SHORT)  # the task types in the paper's column order
UP, DOWN = "▲", "▼"  # significantly above / below the baseline row (never colour alone)
MARKS = {1: UP, -1: DOWN}  # a test's sign -> its mark
MARK_WORDS = {UP: "above", DOWN: "below"}  # as CSV, JSON and frames write a mark
MEASURED = "‡"  # a column holding a task whose test units occur in the training data
