"""Chapter 2's exercises: applying BPE merges, greedy longest match, tied output logits."""


def apply_merges(ids, merges):
    for rank, pair in enumerate(merges):  # in the order they were learned
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
                out.append(256 + rank)
                i += 2  # no overlaps: continue after the merged pair
            else:
                out.append(ids[i])
                i += 1
        ids = out
    return list(ids)


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
