"""Checkers for lesson 17: a queue's first token, sequences in a page budget, prefill a prefix cache saves."""

from __future__ import annotations

from . import as_whole_number, checker, feedback, missing

# Exercise 1: three requests arrive together at step 0 wanting 4, 2 and 3 new tokens; every step gives each running
# request one token (its prompt's prefill gives the first one).
NEW_TOKENS = (4, 2, 3)
# Exercise 2: a budget of 20 pages of 16 tokens; each request ends holding 40 prompt + 24 new tokens; int8 pages are
# 72 / 256 of a float32 page (head_dim 64: 64 one-byte codes and a float32 scale and offset, against 64 float32 numbers).
PAGES, PAGE_SIZE, PROMPT, NEW = 20, 16, 40, 24
FLOAT32_BYTES, INT8_BYTES = 256, 72
# Exercise 3: 10 requests, each a 100-token system prompt and its own 20-token question, one after another.
SYSTEM, QUESTION, REQUESTS = 100, 20, 10


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@checker
def check_first_token_steps(one_at_a_time: object, continuous: object) -> None:
    """Exercise 1: the steps until the third request's first token, one at a time and continuously (batch of 3)."""
    if missing(one_at_a_time) or missing(continuous):
        return
    found, batched = as_whole_number(one_at_a_time), as_whole_number(continuous)
    if found is None or batched is None:
        return feedback(False, "Give whole numbers of steps.", "请用整数给出步数。")
    expected = sum(NEW_TOKENS[:2]) + 1
    if found == expected and batched == 1:
        return feedback(True, f"It waits for the first two ({NEW_TOKENS[0]} + {NEW_TOKENS[1]} steps), then its own prefill "
                        f"gives its first token: step {expected}. In one batch it comes at the first step.",
                        f"它要等前两个请求（{NEW_TOKENS[0]} + {NEW_TOKENS[1]} 步），再用自己的预填充得到第一个词元："
                        f"第 {expected} 步。放在同一批里，第 1 步就得到了。")
    if found == expected - 1:
        return feedback(False, "Count the step that gives its first token too.", "给出它第一个词元的那一步也要算上。")
    if found == sum(NEW_TOKENS):
        return feedback(False, "That is when it finishes; its first token comes after the others' tokens and its prefill.",
                        "这是它结束的时刻；它的第一个词元在前两个请求的词元和它自己的预填充之后就来了。")
    if found == expected:
        return feedback(False, "One at a time is right. Continuously, all three are prefilled in the first step.",
                        "逐个处理的答案对了。连续批处理时，三个请求在第 1 步一起预填充。")
    feedback(False, "One at a time: add the steps of the requests ahead, then one step for its own prefill.",
             "逐个处理：把排在前面的请求所需的步数加起来，再加上它自己预填充的 1 步。")


@checker
def check_budget_sequences(float32: object, int8: object) -> None:
    """Exercise 2: requests that run to their end together in the budget, with float32 pages and with int8 pages."""
    if missing(float32) or missing(int8):
        return
    found, found_int8 = as_whole_number(float32), as_whole_number(int8)
    if found is None or found_int8 is None:
        return feedback(False, "Give whole numbers of requests.", "请用整数给出请求个数。")
    per_request = _ceil(PROMPT + NEW, PAGE_SIZE)
    int8_pages = PAGES * FLOAT32_BYTES // INT8_BYTES
    expected, expected_int8 = PAGES // per_request, int8_pages // per_request
    if (found, found_int8) == (expected, expected_int8):
        return feedback(True, f"Each request ends on {per_request} pages: {PAGES} // {per_request} = {expected}. The same bytes "
                        f"hold {int8_pages} int8 pages: {int8_pages} // {per_request} = {expected_int8}.",
                        f"每个请求最后占 {per_request} 页：{PAGES} // {per_request} = {expected}。同样的字节能放 {int8_pages} 个 "
                        f"int8 页：{int8_pages} // {per_request} = {expected_int8}。")
    if found == PAGES // _ceil(PROMPT, PAGE_SIZE):
        return feedback(False, "A request keeps growing: count the pages it holds at its end, prompt and new tokens.",
                        "请求会不断变长：要按它结束时占的页数算，提示词加上新生成的词元。")
    if found != expected:
        return feedback(False, f"Pages per request: ceil(({PROMPT} + {NEW}) / {PAGE_SIZE}); then whole requests in {PAGES} pages.",
                        f"每个请求的页数：ceil(({PROMPT} + {NEW}) / {PAGE_SIZE})；再看 {PAGES} 页里能放下几个完整的请求。")
    if found_int8 == round(PAGES * FLOAT32_BYTES / INT8_BYTES / per_request):
        return feedback(False, "Round down, twice: whole pages in the bytes, then whole requests in the pages.",
                        "要向下取整两次：字节里能放下的完整页数，页里能放下的完整请求数。")
    feedback(False, f"int8: the same bytes hold {FLOAT32_BYTES} / {INT8_BYTES} times the pages; round down, then divide.",
             f"int8：同样的字节能放下 {FLOAT32_BYTES} / {INT8_BYTES} 倍的页；先向下取整，再做除法。")


@checker
def check_prefill_tokens(answer: object) -> None:
    """Exercise 3: prompt tokens the model computes for the whole stream with a prefix cache of full 16-token pages."""
    if missing(answer):
        return
    found = as_whole_number(answer)
    if found is None:
        return feedback(False, "Give a whole number of tokens.", "请用整数给出词元数。")
    cached = SYSTEM // PAGE_SIZE * PAGE_SIZE
    prompt = SYSTEM + QUESTION
    expected = prompt + (REQUESTS - 1) * (prompt - cached)
    if found == expected:
        return feedback(True, f"The first request computes all {prompt}; each later one reads {cached} cached tokens (whole "
                        f"pages only) and computes {prompt - cached}: {expected} of {REQUESTS * prompt}.",
                        f"第一个请求要算全部 {prompt} 个；后面每个请求读到 {cached} 个缓存的词元（只有整页），自己算 "
                        f"{prompt - cached} 个：一共 {expected} 个，不用缓存时是 {REQUESTS * prompt} 个。")
    if found == prompt + (REQUESTS - 1) * QUESTION:
        return feedback(False, "Only full pages are cached: the system prompt's last, partly filled page is computed again.",
                        "只有写满的页才会被缓存：系统提示词最后那一页没写满，要重新计算。")
    if found == (REQUESTS - 1) * (prompt - cached) or found == REQUESTS * (prompt - cached):
        return feedback(False, "The first request finds nothing cached: it computes its whole prompt.",
                        "第一个请求什么缓存也找不到：它要把整个提示词都算一遍。")
    feedback(False, "First request: its whole prompt. Each later one: its prompt minus the system prompt's full pages.",
             "第一个请求：整个提示词。后面的每个请求：提示词减去系统提示词中写满的那些页。")
