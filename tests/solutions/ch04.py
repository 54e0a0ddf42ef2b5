"""Chapter 4's exercises: splitting into heads, merging them back, masking heads."""


def split_heads(x, num_heads):
    batch, length, d_model = x.shape
    x = x.view(batch, length, num_heads, d_model // num_heads)  # (B, T, h, Dh)
    return x.transpose(1, 2)  # (B, h, T, Dh)


def merge_heads(x):
    batch, heads, length, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * d_head)  # (B, T, h * Dh)


def head_mask(x, head_mask):
    batch, length, d_model = x.shape
    heads = head_mask.shape[0]
    per_head = x.view(batch, length, heads, d_model // heads)  # (B, T, h, Dh)
    return (per_head * head_mask[:, None]).view(batch, length, d_model)  # (B, T, d_model)
