"""Chapter 2's exercises: applying BPE merges, greedy longest match, tied output logits."""


def apply_merges(ids, merges):
    # GPT-2's way: merge the adjacent pair that was learned first, until no pair is a merge
    ranks = {tuple(pair): rank for rank, pair in enumerate(merges)}
    ids = list(ids)
    while len(ids) > 1:
        rank, i = min(
            (ranks.get(pair, len(merges)), i)
            for i, pair in enumerate(zip(ids[:-1], ids[1:], strict=True))
        )
        if rank == len(merges):  # no adjacent pair is a merge
            break
        ids[i : i + 2] = [256 + rank]  # the first occurrence; the loop finds the others
    return ids


def longest_match(word, vocab):
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while word[start:end] not in vocab:  # every single character is in vocab
            end -= 1
        pieces.append(word[start:end])
        start = end
    return pieces


def tied_logits(hidden, weight):
    return hidden @ weight.T  # (B, T, d) @ (d, V) -> (B, T, V)
