"""fleet_sdk.rewards: outcome -> reward (None vs 0.0), opt-in partial reward (docs/wire.md#verifiers)."""

from __future__ import annotations

import pytest

from fleet_sdk.rewards import is_judge_error, partial_reward, reward_from_outcome, verifier_feedback
from fleet_sdk.verifiers import ErrorType, VerifierError, VerifierOutcome


def app_block(app: str, successes: list[str], errors: list[str], passed: int) -> str:
    return (
        f"<<< VERIFY_{app} <<<\n"
        f"Checking {app} state...\n"
        ">>> ERROR_ACCUMULATOR >>>\n"
        f"{errors!r}\n"
        "<<< ERROR_ACCUMULATOR <<<\n"
        ">>> SUCCESS_ACCUMULATOR >>>\n"
        f"{successes!r}\n"
        "<<< SUCCESS_ACCUMULATOR <<<\n"
        f">>> VERIFY_{app} >>>\n"
        f"App {app}: {passed}\n"
    )


# A browser-use rollout as the multi-app verifier prints it: the agent solved lifeline, not
# outlook, and medora only reports its guard check (a Lifeline-only task), so it is trivial.
BU_ROLLOUT_STDOUT = (
    "Starting verification for task bu-lifeline-outlook-0412\n"
    "[medora] seed snapshot loaded (142 rows)\n"
    + app_block(
        "outlook",
        ["[C] Draft exists for dr.patel@lifeline.example"],
        ["[X] Email to dr.patel@lifeline.example was not sent", "[X] Appointment time missing from body"],
        0,
    )
    + app_block(
        "lifeline",
        ["[C] Appointment 2024-06-12 09:30 booked for Maria Lopez", "[C] Reminder flag set"],
        [],
        1,
    )
    + app_block("medora", ["[C] No unexpected changes in medora database"], [], 1)
    + "Combined result: 2/3 apps passed\n"
    "Final score: 0\n"
)


# -- partial_reward ----------------------------------------------------------------------------


def test_real_bu_rollout_leaves_the_trivial_medora_out() -> None:
    """Regression: trivial-pass apps (guard checks only) must not inflate the fraction: 1 of the 2 real
    apps passed, so 0.5, not the 2/3 that "Combined result" reports."""
    assert partial_reward(BU_ROLLOUT_STDOUT) == 0.5


def test_one_real_app_passes() -> None:
    stdout = (
        app_block("outlook", ["[C] Email sent", "[C] Email flagged"], [], 1)
        + app_block("fira", [], ["[X] Issue not moved to Done"], 0)
        + "Combined result: 1/2 apps passed\n"
    )
    assert partial_reward(stdout) == 0.5


def test_all_real_apps_pass() -> None:
    stdout = (
        app_block("outlook", ["[C] Email sent"], [], 1)
        + app_block("fira", ["[C] Issue moved"], [], 1)
        + app_block("medora", ["[C] no unexpected changes"], [], 1)
    )
    assert partial_reward(stdout) == 1.0


def test_no_real_app_passes() -> None:
    stdout = app_block("outlook", [], ["[X] not sent"], 0) + app_block(
        "medora", ["No filesystem changes"], [], 1
    )
    assert partial_reward(stdout) == 0.0


def test_all_trivial_apps_give_none() -> None:
    stdout = (
        app_block("medora", ["[C] No unexpected changes"], [], 1)
        + app_block("files", ["No filesystem changes"], [], 1)
        + app_block("mailbox", ["No-unexpected-envelopes"], [], 1)
        + "Combined result: 3/3 apps passed\n"
    )
    assert partial_reward(stdout) is None


def test_three_app_mix() -> None:
    stdout = (
        app_block("outlook", ["[C] Email sent"], [], 1)
        + app_block("fira", ["[C] Ticket created"], ["[X] Wrong assignee"], 0)
        + app_block("calendar", ["[C] Event created", "[C] Invite sent"], [], 1)
        + "Combined result: 2/3 apps passed\n"
    )
    assert partial_reward(stdout) == pytest.approx(2 / 3)


def test_a_failing_guard_app_still_counts() -> None:
    """Only trivial *passes* are left out: an app whose guard check failed is a real failure."""
    stdout = app_block("outlook", ["[C] Email sent"], [], 1) + app_block(
        "medora", ["[C] No unexpected changes"], ["[X] 3 unexpected rows changed"], 0
    )
    assert partial_reward(stdout) == 0.5


def test_an_app_with_a_real_success_beside_a_marker_is_not_trivial() -> None:
    stdout = app_block("outlook", ["[C] No unexpected changes", "[C] Email sent"], [], 1) + app_block(
        "fira", [], ["[X] missing"], 0
    )
    assert partial_reward(stdout) == 0.5


def test_inline_success_accumulator_with_brackets_in_strings() -> None:
    stdout = (
        "<<< VERIFY_outlook <<<\n"
        "... SUCCESS_ACCUMULATOR ['[C] Email sent', '[C] Email flagged'] ...\n"
        ">>> VERIFY_outlook >>>\n"
        "App outlook: 1\n"
        "<<< VERIFY_medora <<<\n"
        "SUCCESS_ACCUMULATOR ['[C] no unexpected changes']\n"
        ">>> VERIFY_medora >>>\n"
        "App medora: 1\n"
        "<<< VERIFY_fira <<<\n"
        "SUCCESS_ACCUMULATOR []\n"
        ">>> VERIFY_fira >>>\n"
        "App fira: 0\n"
        "Combined result: 2/3 apps passed\n"
    )
    assert partial_reward(stdout) == 0.5


def test_legacy_accumulators() -> None:
    stdout = (
        "Running checks\n"
        ">>> ERROR_ACCUMULATOR >>>\n"
        "['[X] Wrong due date']\n"
        "<<< ERROR_ACCUMULATOR <<<\n"
        ">>> SUCCESS_ACCUMULATOR >>>\n"
        "['[C] Task created', '[C] Assignee set', \"[C] Label 'urgent' added\"]\n"
        "<<< SUCCESS_ACCUMULATOR <<<\n"
    )
    assert partial_reward(stdout) == 0.75


def test_legacy_accumulators_are_never_evaluated() -> None:
    stdout = (
        ">>> ERROR_ACCUMULATOR >>>\n"
        "[__import__('os').system('echo pwned')]\n"
        "<<< ERROR_ACCUMULATOR <<<\n"
        ">>> SUCCESS_ACCUMULATOR >>>\n"
        "['[C] ok']\n"
        "<<< SUCCESS_ACCUMULATOR <<<\n"
    )
    assert partial_reward(stdout) is None


def test_legacy_needs_both_accumulators_and_at_least_one_item() -> None:
    only_success = ">>> SUCCESS_ACCUMULATOR >>>\n['[C] ok']\n<<< SUCCESS_ACCUMULATOR <<<\n"
    assert partial_reward(only_success) is None
    empty = (
        ">>> ERROR_ACCUMULATOR >>>\n[]\n<<< ERROR_ACCUMULATOR <<<\n"
        ">>> SUCCESS_ACCUMULATOR >>>\n[]\n<<< SUCCESS_ACCUMULATOR <<<\n"
    )
    assert partial_reward(empty) is None


def test_combined_line_alone() -> None:
    assert partial_reward("lots of logs\nCombined result: 1/4 apps passed\n") == 0.25


@pytest.mark.parametrize(
    "stdout",
    [
        None,
        "",
        "   \n",
        "Traceback (most recent call last):\n  boom",
        "App store opened; score: 1",
        "x" * 5000,
    ],
)
def test_empty_or_random_text_gives_no_partial_reward(stdout: str | None) -> None:
    assert partial_reward(stdout) is None


# -- is_judge_error ----------------------------------------------------------------------------


def test_is_judge_error() -> None:
    assert is_judge_error("checking...\nJUDGE ERROR: the judge model timed out\n")
    assert is_judge_error("  JUDGE ERROR: indented")
    assert not is_judge_error("the word JUDGE ERROR: appears mid-line")
    assert not is_judge_error("")
    assert not is_judge_error(None)


# -- reward_from_outcome -----------------------------------------------------------------------


def ok(score: float, stdout: str = "") -> VerifierOutcome:
    return VerifierOutcome(success=True, score=score, stdout=stdout)


def failed(kind: ErrorType, stdout: str = "") -> VerifierOutcome:
    return VerifierOutcome(
        success=False, score=None, stdout=stdout, error=VerifierError(type=kind, message="x")
    )


def test_graded_scores_pass_through() -> None:
    assert reward_from_outcome(ok(1.0)) == 1.0
    assert reward_from_outcome(ok(0.0)) == 0.0
    assert reward_from_outcome(ok(0.3)) == 0.3


@pytest.mark.parametrize("kind", ["exception", "timeout", "memory_limit", "syntax_error", "invalid_result"])
def test_faults_are_unknown_not_zero(kind: ErrorType) -> None:
    """Seed/fork: treating verifier failures as 0 poisoned 42% of training groups; a failure is
    None (leave the rollout out), never 0.0."""
    assert reward_from_outcome(failed(kind)) is None
    assert reward_from_outcome(failed(kind, stdout=BU_ROLLOUT_STDOUT), partial=True) is None


def test_judge_error_is_unknown() -> None:
    assert reward_from_outcome(ok(0.0, "JUDGE ERROR: rate limited\n")) is None
    assert reward_from_outcome(ok(1.0, "JUDGE ERROR: rate limited\n"), partial=True) is None


def test_success_flag_without_score_is_unknown() -> None:
    assert reward_from_outcome(VerifierOutcome(success=True, score=None)) is None


def test_partial_reward_is_opt_in() -> None:
    assert reward_from_outcome(ok(0.0, BU_ROLLOUT_STDOUT)) == 0.0
    assert reward_from_outcome(ok(0.0, BU_ROLLOUT_STDOUT), partial=True) == 0.5


def test_partial_reward_only_replaces_a_zero() -> None:
    assert reward_from_outcome(ok(1.0, BU_ROLLOUT_STDOUT), partial=True) == 1.0
    assert reward_from_outcome(ok(0.2, BU_ROLLOUT_STDOUT), partial=True) == 0.2


def test_partial_reward_without_usable_stdout_keeps_the_zero() -> None:
    assert reward_from_outcome(ok(0.0, ""), partial=True) == 0.0
    assert reward_from_outcome(ok(0.0, "nothing to see"), partial=True) == 0.0
    all_trivial = app_block("medora", ["no unexpected changes"], [], 1)
    assert reward_from_outcome(ok(0.0, all_trivial), partial=True) == 0.0


@pytest.mark.parametrize(
    ("stdout", "feedback"),
    [
        ("expected 6 pending orders, answer was None\n", "expected 6 pending orders, answer was None"),
        (
            "['answer does not name the organizer', 'answer does not give the 12 invitees']\n",
            "answer does not name the organizer; answer does not give the 12 invitees",
        ),
        (
            ">>> SUCCESS_ACCUMULATOR >>>\n[]\n<<< SUCCESS_ACCUMULATOR <<<\n"
            ">>> ERROR_ACCUMULATOR >>>\n['order 1021 is not cancelled']\n<<< ERROR_ACCUMULATOR <<<\n",
            "order 1021 is not cancelled",
        ),
        (  # one error list per app block, the App and Combined lines left out
            "<<< VERIFY_refunds <<<\n>>> ERROR_ACCUMULATOR >>>\n['no refund']\n<<< ERROR_ACCUMULATOR <<<\n"
            ">>> VERIFY_refunds >>>\nApp refunds: 0\n<<< VERIFY_notes <<<\n>>> ERROR_ACCUMULATOR >>>\n"
            "['no note']\n<<< ERROR_ACCUMULATOR <<<\n>>> VERIFY_notes >>>\nApp notes: 0\n"
            "Combined result: 0/2 apps passed\n",
            "no refund; no note",
        ),
        (">>> ERROR_ACCUMULATOR >>>\n[]\n<<< ERROR_ACCUMULATOR <<<\n", None),  # nothing said wrong
        ("", None),
        (None, None),
    ],
)
def test_verifier_feedback_reads_what_the_verifier_said_was_wrong(
    stdout: str | None, feedback: str | None
) -> None:
    assert verifier_feedback(stdout) == feedback


def test_verifier_feedback_is_cut_to_500_characters() -> None:
    text = verifier_feedback("x" * 2000)
    assert text is not None and len(text) == 500 and text.endswith("...")
