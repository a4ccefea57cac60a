"""results/leaderboard.csv, .md and figure: every measure the experiments' tables name, ranked per
test by the paper's criterion, ties within uncertainty shown as ties."""

from _contract import Inputs, Output
from _figures import save_figure
from _job import log, run

from diversity_core.atomic import atomic_write
from diversity_core.measures.registry import MEASURES
from diversity_core.reporting.leaderboard import (
    draw_leaderboard,
    leaderboard,
    render_csv,
    render_markdown,
)


def main(results: Inputs, table: Output, markdown: Output, figure: Output, figure_pdf: Output,
         results_dir: str, experiments: list):
    """Read the final tables of EXPERIMENTS under RESULTS_DIR (RESULTS: the files the leaderboard
    reads) and write the leaderboard as TABLE (.csv), MARKDOWN (.md) and FIGURE (.png, and
    FIGURE_PDF)."""
    board = leaderboard(results_dir, experiments, MEASURES)
    with atomic_write(table) as out:
        out.write(render_csv(board))
    with atomic_write(markdown) as out:
        out.write(render_markdown(board))
    save_figure(draw_leaderboard(board), figure, figure_pdf)
    tests = [column[:-len("_rank")] for column in board.columns if column.endswith("_rank")]
    log.info("%d measures, %d tests (%s) from %d result files", len(board), len(tests),
             ", ".join(tests), len(results))
    return {"measures": len(board), "tests": tests}


if __name__ == "__main__":
    run(main, globals().get("snakemake"))
