"""How the harness turns its string requests into token sequences, restated
from lm-eval 0.4.13's own rules (TemplateLM._encode_pair and loglikelihood,
utils.get_rolling_token_windows and make_disjoint_window, the left
truncation of its Hugging Face backend, HFLM) so that trillion is scored on
exactly the tokens a Hugging Face backend would be. Pure functions on lists:
unit-tested by hand-computed cases (tests/eval/test_windows.py)."""


def split_pair(context, continuation):
    """The harness moves the context's trailing whitespace to the start of the
    continuation before tokenizing ("Answer: " + "Paris" is scored as
    "Answer:" + " Paris"), because BPE vocabularies attach the space to the
    following word."""
    n = len(context) - len(context.rstrip())
    if n:
        return context[:-n], context[-n:] + continuation
    return context, continuation


def pair_tokens(ctx_ids, whole_ids):
    """Context and continuation ids of a non-empty context: the continuation
    is what tokenizing context+continuation adds after the context's own
    tokens (whole[len(ctx):]), as _encode_pair does, even where the BPE merges
    across the boundary."""
    return list(ctx_ids), list(whole_ids[len(ctx_ids):])


def empty_context_tokens(cont_ids, prefix_token_id):
    """An empty context: the continuation is conditioned on the prefix token
    (BOS), unless it already begins with it, in which case that first token
    becomes the context (TemplateLM.loglikelihood)."""
    cont_ids = list(cont_ids)
    if not cont_ids:
        raise ValueError("empty continuation with an empty context: nothing to score")
    if cont_ids[0] != prefix_token_id:
        return [prefix_token_id], cont_ids
    return cont_ids[:1], cont_ids[1:]


def scored_sequence(ctx_ids, cont_ids, max_length):
    """The token sequence trillion scores for (ctx, cont) and whether it was
    cut. The harness feeds (ctx+cont)[-(max_length+1):][:-1] to the model and
    reads the last len(cont) predictions: max_length input positions, the
    last token only a target. trillion's score takes the whole sequence
    (inputs and targets), so it gets the last max_length+1 tokens; the
    continuation's log-probs are the last len(cont) of its token_logprobs."""
    whole = list(ctx_ids) + list(cont_ids)
    if len(cont_ids) > max_length:
        raise ValueError(f"continuation of {len(cont_ids)} tokens exceeds max_length {max_length}")
    return whole[-(max_length + 1):], len(whole) > max_length + 1


def rolling_windows(tokens, prefix_token_id, max_length):
    """The (context, predicted) windows of loglikelihood_rolling: every token
    of the document predicted exactly once, each window at most max_length
    inputs; the first conditioned on the prefix token, later ones on the
    tokens before them (get_rolling_token_windows with context_len=1, each
    made disjoint). An empty document has no windows (log-likelihood 0)."""
    if max_length < 1:
        raise ValueError(f"max_length {max_length} < 1")
    out = []
    if not tokens:
        return out
    tokens = list(tokens)
    first = min(max_length, len(tokens))
    out.append(([prefix_token_id] + tokens[:first - 1], tokens[:first]))
    done = first
    while done < len(tokens):
        k = min(len(tokens) - done, max_length)
        end = done + k
        # The window's inputs are tokens[end-max_length-1 : end-1] (a full
        # max_length), its predictions the last k; the inputs left of the
        # predictions are its context.
        inputs = tokens[max(0, end - max_length - 1):end - 1]
        pred = tokens[end - k:end]
        out.append((inputs, pred))
        done = end
    return [_disjoint(c, p) for c, p in out]


def _disjoint(ctx, pred):
    """make_disjoint_window: drop from the context the tokens that are also
    predicted (all but the first prediction overlaps the inputs' tail)."""
    return ctx[:len(ctx) - (len(pred) - 1)], pred


def generation_prompt(ids, max_length, max_gen_toks):
    """The prompt of generate_until, left-truncated to max_length -
    max_gen_toks tokens so prompt and generation fit in the context; returns
    (ids, cut)."""
    room = max_length - max_gen_toks
    if room <= 0:
        raise ValueError(f"max_gen_toks {max_gen_toks} leaves no room for a prompt in max_length {max_length}")
    return list(ids[-room:]), len(ids) > room


def cut_at_stops(text, stops):
    """The generated text up to the first occurrence of each stop sequence in
    turn (the harness's postprocessing; the stop itself is never returned)."""
    for s in stops:
        if s:
            text = text.split(s)[0]
    return text
