"""The GPU lock: correctness work overlaps, a timing phase excludes everything and is not starved."""
import threading
import time

from pipeline.evaluation.gpu.lock import CodeLock, GpuLock


def hold(lock_cm, entered: threading.Event, release: threading.Event, log: list, name: str):
    with lock_cm():
        log.append(f"{name} in")
        entered.set()
        release.wait(10)
        log.append(f"{name} out")


def start(target, *args) -> threading.Thread:
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def test_shared_holders_overlap_and_timing_waits_for_them(tmp_path):
    lock, log = GpuLock("3", str(tmp_path)), []
    a_in, a_go, b_in, b_go, c_in, c_go = (threading.Event() for _ in range(6))
    start(hold, lock.shared, a_in, a_go, log, "a")
    assert a_in.wait(5)
    start(hold, lock.shared, b_in, b_go, log, "b")
    assert b_in.wait(5), "a second shared holder must enter while the first holds the lock"
    tc = start(hold, lock.exclusive, c_in, c_go, log, "c")
    assert not c_in.wait(0.3), "timing must not start while correctness work holds the GPU"
    a_go.set()
    b_go.set()
    assert c_in.wait(5)
    c_go.set()
    tc.join(5)
    assert log.index("c in") > max(log.index("a out"), log.index("b out"))


def test_waiting_timer_keeps_new_shared_holders_out(tmp_path):
    lock, log = GpuLock("0", str(tmp_path)), []
    a_in, a_go, c_in, c_go, d_in, d_go = (threading.Event() for _ in range(6))
    start(hold, lock.shared, a_in, a_go, log, "a")
    assert a_in.wait(5)
    start(hold, lock.exclusive, c_in, c_go, log, "c")
    time.sleep(0.2)  # c is now waiting on the lock
    td = start(hold, lock.shared, d_in, d_go, log, "d")
    assert not d_in.wait(0.3), "a new shared holder must queue behind a waiting timer"
    a_go.set()
    assert c_in.wait(5)
    assert not d_in.is_set()
    c_go.set()
    assert d_in.wait(5)
    d_go.set()
    td.join(5)
    assert log == ["a in", "a out", "c in", "c out", "d in", "d out"]


def test_locks_are_per_gpu(tmp_path):
    busy, free = GpuLock("0", str(tmp_path)), GpuLock("1", str(tmp_path))
    a_in, a_go, b_in, b_go = (threading.Event() for _ in range(4))
    start(hold, busy.exclusive, a_in, a_go, [], "a")
    assert a_in.wait(5)
    start(hold, free.exclusive, b_in, b_go, [], "b")
    assert b_in.wait(5), "timing on another GPU must not wait"
    a_go.set()
    b_go.set()


def test_turns_keep_a_load_ahead_out_between_a_window_and_its_check_without_deadlock(tmp_path):
    """A holder's turns (the timed rounds): its candidate_code lock is held from the exclusive turn through the
    shared one, so a sibling loaded ahead (GpuLock.shared_with) runs only after the check; another evaluator's
    timing, waiting, goes first once the window is done (before the check: the timers' turns run back to back);
    with both waiting, nobody deadlocks."""
    lock, log = GpuLock("5", str(tmp_path)), []
    code = CodeLock()
    turns = lock.turns(code)
    turns.exclusive()
    log.append("window")

    def load_ahead():
        with lock.shared_with(code, "load"):
            log.append("load")

    def other_timing():
        with lock.exclusive():
            log.append("other window")
    threads = [start(load_ahead), start(other_timing)]
    time.sleep(0.2)
    assert log == ["window"], "nothing runs beside an exclusive turn"
    turns.shared()
    log.append("check")
    time.sleep(0.2)
    assert log == ["window", "other window", "check"], \
        "the waiting timer goes between the window and its check; the load waits for the check"
    turns.exclusive()  # gives up candidate_code and the shared turn: the load comes first or after
    log.append("next window")
    turns.release()
    for t in threads:
        t.join(5)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert log[:3] == ["window", "other window", "check"]
    assert set(log) == {"window", "check", "load", "other window", "next window"} and not code.locked()


def test_timers_of_several_holders_run_back_to_back_and_their_shared_turns_overlap(tmp_path):
    """Three holders, each a window (exclusive) then its checks (shared, three times as long), round after round:
    a holder back from its window lets the waiting timers go first, so the shared turns overlap instead of each
    timer waiting out the one before (a convoy: every round of every holder one after the other)."""
    lock = GpuLock("7", str(tmp_path))
    window_s, check_s, rounds, holders = 0.01, 0.03, 8, 3
    spans = []

    def holder():
        turns = lock.turns(CodeLock())
        for _ in range(rounds):
            turns.exclusive("window")
            time.sleep(window_s)
            turns.shared("checks")
            t0 = time.monotonic()
            time.sleep(check_s)
            spans.append((t0, time.monotonic()))
        turns.release()
    t0 = time.monotonic()
    threads = [start(holder) for _ in range(holders)]
    for t in threads:
        t.join(30)
    wall = time.monotonic() - t0
    convoy = rounds * holders * (window_s + check_s)  # 0.96 s; back to back with overlapping checks: about 0.48
    assert wall < 0.8 * convoy, f"{wall:.2f} s: the shared turns did not overlap (a convoy takes {convoy:.2f} s)"
    overlapping = sum(1 for i, (a, b) in enumerate(spans) for c, d in spans[i + 1:] if a < d and c < b)
    assert overlapping >= rounds, f"only {overlapping} pairs of shared turns overlapped"


def test_a_load_ahead_goes_after_a_check_while_the_timer_runs_its_rounds(tmp_path):
    """A sibling's load (GpuLock.shared_with) asked for while a timer runs its rounds, beside four other evaluators'
    timers: it runs once a round's check is over (CodeLock let go, the timer still in its shared turn), not only
    when the timer's rounds end; never between a window and its check."""
    lock = GpuLock("9", str(tmp_path))
    code, log, stop = CodeLock(), [], threading.Event()

    def timer():
        turns = lock.turns(code)
        for k in range(40):
            turns.exclusive("window")
            log.append(("window", k))
            time.sleep(0.004)
            turns.shared("checks")
            time.sleep(0.002)
            log.append(("check", k))
            turns.code_done()
            time.sleep(0.004)  # the next round's inputs
        turns.release()
        log.append(("done", 40))

    def other():
        turns = lock.turns(CodeLock())
        while not stop.is_set():
            turns.exclusive("window")
            time.sleep(0.004)
            turns.shared("checks")
            time.sleep(0.006)
        turns.release()

    def load():
        time.sleep(0.05)
        with lock.shared_with(code, "a candidate's load"):
            log.append(("load", None))
    others = [start(other) for _ in range(4)]
    threads = [start(timer), start(load)]
    for t in threads:
        t.join(30)
    stop.set()
    for t in others:
        t.join(10)
    kinds = [k for k, _ in log]
    at = kinds.index("load")
    assert kinds[at - 1] == "check", "the load ran between a window and its check"
    assert log[at - 1][1] < 12, f"the load waited for {log[at - 1][1]} of the timer's 40 rounds"


def test_a_new_shared_holder_lets_timers_go_first_only_so_long(tmp_path):
    """A timer that keeps its place in the queue without taking its turn cannot starve shared work: after
    timers_first_s a new shared holder goes on to the gate."""
    lock = GpuLock("8", str(tmp_path), timers_first_s=0.3)
    queue = lock._queue()  # a timer waiting (or a stream of them)
    try:
        t0 = time.monotonic()
        with lock.shared("checks"):
            waited = time.monotonic() - t0
    finally:
        queue.close()
    assert 0.25 <= waited < 3.0
    t0 = time.monotonic()
    with lock.shared("checks"):
        assert time.monotonic() - t0 < 0.2, "with no timer queued a shared holder enters at once"


def test_a_turn_passes_with_the_holders_gpu_work_done(tmp_path):
    done = []
    lock = GpuLock("6", str(tmp_path), idle=lambda: done.append("idle"))
    turns = lock.turns()
    turns.exclusive()
    turns.shared()
    assert done == ["idle"]  # the window's work done before waiting timers get the GPU
    turns.exclusive()
    assert done == ["idle", "idle"]
    turns.release()
    assert done == ["idle", "idle", "idle"]


def test_a_failed_switch_leaves_nothing_held_and_no_one_told_to_wait_outside(tmp_path):
    """The window's GPU work failing to finish (idle raises) while the turn goes to shared: the flag that sends
    loaders to wait outside is cleared, and a release after it frees candidate_code and the lock."""
    def idle():
        if fail:
            raise RuntimeError("the GPU failed")
    fail = False
    lock, code = GpuLock("10", str(tmp_path), idle=idle), CodeLock()
    turns = lock.turns(code)
    turns.exclusive("window")
    fail = True
    try:
        turns.shared("checks")
    except RuntimeError:
        pass
    fail = False
    assert not code.reentering
    turns.release()
    assert not code.locked()
    with lock.exclusive("another timer"):  # nothing of the failed turn is still held
        pass
