"""Answer parsing: fenced blocks, several blocks, missing or unclosed fences, the entry point rule."""
import pytest

from pipeline.core.records import Candidate, EvalResult
from pipeline.evaluation.feedback import format_feedback
from pipeline.rollout.parsing import defines, extract_code, parse_response

SAXPY = """__global__ void k(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void saxpy(int n, float a, const float* x, float* y) {
    k<<<(n + 255) / 256, 256>>>(n, a, x, y);
}
"""


@pytest.mark.parametrize("fence,lang", [("```", "cuda"), ("```", "cpp"), ("```", ""), ("~~~", "cu"), ("````", "c++")])
def test_one_block_in_any_code_language(fence, lang):
    text = f"Here is my kernel.\n{fence}{lang}\n{SAXPY}{fence}\nIt uses one thread per element."
    got = extract_code(text, "saxpy")
    assert got.code == SAXPY and got.problem == ""


def test_last_block_defining_the_entry_wins():
    fragment = "__global__ void k(float* y) { y[0] = 1; }\n"
    second = SAXPY.replace("256, 256", "256, 256 /* v2 */")
    text = (f"First the kernel:\n```cuda\n{fragment}```\nThe file:\n```cuda\n{SAXPY}```\n"
            f"Corrected:\n```cuda\n{second}```\nUsage:\n```python\nsaxpy(n)\n```\n")
    assert extract_code(text, "saxpy").code == second


def test_missing_fences_give_a_helpful_format_error():
    got = extract_code(SAXPY, "saxpy")
    assert got.code is None and "no fenced code block" in got.problem and "```cuda" in got.problem


def test_unclosed_block_mentions_the_token_limit_when_cut_off():
    text = f"```cuda\n{SAXPY[:60]}"
    cut = extract_code(text, "saxpy", finish_reason="length")
    assert "never closed" in cut.problem and "token limit" in cut.problem
    assert "token limit" not in extract_code(text, "saxpy", finish_reason="stop").problem


def test_only_other_languages_and_missing_entry():
    py = extract_code("```python\nprint(1)\n```", "launch")
    assert py.code is None and "```python" in py.problem
    one = extract_code("```cuda\n__global__ void k() {}\n```", "launch")
    assert one.problem.startswith("the code block does not define the function launch(...)")
    two = extract_code("```cuda\nint a;\n```\n```cuda\nint b;\n```", "launch")
    assert "none of the 2 code blocks" in two.problem
    assert "empty" in extract_code("   \n", "launch").problem


def test_defines_needs_a_body_and_ignores_comments():
    assert defines(SAXPY, "saxpy")
    assert not defines('extern "C" void saxpy(int n);\nint main() { saxpy(3); }', "saxpy")  # declared and called
    assert not defines("// void saxpy(int n) {\n", "saxpy")
    split = ('extern "C" int launch(void* const* in, void* const* out,\n'
             '  const int64_t* s, cudaStream_t st)\n{ return 0; }')
    assert defines(split, "launch")


def test_parse_response_gives_candidate_or_format_error(builtin_tasks):
    saxpy, relu = builtin_tasks["c2cuda/saxpy"], builtin_tasks["torch2cuda/relu"]
    cand = parse_response(saxpy, f"```cuda\n{SAXPY}```", turn=2)
    assert isinstance(cand, Candidate) and cand.format == "c2cuda" and cand.turn == 2 and cand.task_id == saxpy.id
    light = parse_response(relu, f"```cuda\n{relu.implementations[0].code}```", turn=0)
    assert isinstance(light, Candidate) and light.format == "light"
    bad = parse_response(relu, "I would use a grid-stride loop.", turn=1, finish_reason="length")
    assert isinstance(bad, EvalResult) and bad.verdict == "format_error" and bad.turn == 1 and bad.format == "light"
    message = format_feedback(bad)  # the evaluator's formatter turns the reason into the next user message
    assert message.startswith("Your answer could not be used.") and "```cuda" in message and "token limit" in message
