# Probe: chapter 12's self-checks against realistic wrong answers and correct variants.
import sys, io, contextlib, torch
torch.set_num_threads(1)
sys.path.insert(0, '/work/main')
from mtlib import exercises
NEG = float("-inf")
def run(checker, fn, label):
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            checker(fn)
        print(f"  ACCEPTED  {label}: {buf.getvalue().strip()[:110]}")
    except Exception as e:
        msg = str(e).replace("\n", " | ")
        print(f"  REJECTED  {label}: {type(e).__name__}: {msg[:330]}")

print("== check_online_softmax: wrong answers ==")
def mirror_first_max(m_a, l_a, acc_a, m_b, l_b, acc_b):  # assumes block a has the larger max
    b = torch.exp(m_b - m_a); return m_a, l_a + l_b * b, acc_a + acc_b * b
def same_factor(m_a, l_a, acc_a, m_b, l_b, acc_b):  # one factor for both blocks
    m = torch.maximum(m_a, m_b); a = torch.exp(m_a - m); return m, (l_a + l_b) * a, (acc_a + acc_b) * a
def python_max(m_a, l_a, acc_a, m_b, l_b, acc_b):  # Python's max on tensors
    m = max(m_a, m_b); a, b = torch.exp(m_a - m), torch.exp(m_b - m); return m, l_a * a + l_b * b, acc_a * a + acc_b * b
def acc_as_average(m_a, l_a, acc_a, m_b, l_b, acc_b):  # weights the accs by l as if they were averages
    m = torch.maximum(m_a, m_b); a, b = l_a * torch.exp(m_a - m), l_b * torch.exp(m_b - m)
    return m, a + b, acc_a * a + acc_b * b
def sum_of_maxima(m_a, l_a, acc_a, m_b, l_b, acc_b):  # m = m_a + m_b style slip
    m = m_a + m_b; a, b = torch.exp(m_a - m), torch.exp(m_b - m); return m, l_a * a + l_b * b, acc_a * a + acc_b * b
def global_max(m_a, l_a, acc_a, m_b, l_b, acc_b):  # one max over the whole batch of rows
    m = torch.maximum(m_a, m_b).max().expand_as(m_a); a, b = torch.exp(m_a - m), torch.exp(m_b - m)
    return m, l_a * a + l_b * b, acc_a * a + acc_b * b
def in_place(m_a, l_a, acc_a, m_b, l_b, acc_b):
    m = torch.maximum(m_a, m_b); a, b = torch.exp(m_a - m), torch.exp(m_b - m)
    l_a.mul_(a).add_(l_b * b); acc_a.mul_(a).add_(acc_b * b); return m, l_a, acc_a
for f in (mirror_first_max, same_factor, python_max, acc_as_average, sum_of_maxima, global_max, in_place):
    run(exercises.check_online_softmax, f, f.__name__)

print("== check_online_softmax: correct variants ==")
def naive(m_a, l_a, acc_a, m_b, l_b, acc_b):
    m = torch.maximum(m_a, m_b); a, b = torch.exp(m_a - m), torch.exp(m_b - m)
    return m, l_a * a + l_b * b, acc_a * a + acc_b * b
def branchy(m_a, l_a, acc_a, m_b, l_b, acc_b):  # rescale only the block with the smaller max
    a_big = m_a >= m_b
    m = torch.where(a_big, m_a, m_b)
    a = torch.where(a_big, torch.ones_like(m_a), torch.exp(m_a - m_b))
    b = torch.where(a_big, torch.exp(m_b - m_a), torch.ones_like(m_b))
    return m, l_a * a + l_b * b, acc_a * a + acc_b * b
def log_space(m_a, l_a, acc_a, m_b, l_b, acc_b):
    m = torch.maximum(m_a, m_b)
    lse = torch.logaddexp(torch.log(l_a) + m_a, torch.log(l_b) + m_b)
    safe = m.masked_fill(m == NEG, 0.0)
    return m, torch.exp(lse - safe), acc_a * torch.exp(m_a - safe) + acc_b * torch.exp(m_b - safe)
def torch_max(m_a, l_a, acc_a, m_b, l_b, acc_b):
    m = torch.max(m_a, m_b); a, b = (m_a - m).exp(), (m_b - m).exp()
    return m, l_a * a + l_b * b, acc_a * a + acc_b * b
for f in (naive, branchy, log_space, torch_max):
    run(exercises.check_online_softmax, f, f.__name__)
print("  the naive merge on a row that saw no key in EITHER block (m_a = m_b = -inf, l = 0, acc = 0):")
z = torch.zeros(1, 1)
print("   ", [t.tolist() for t in naive(z + NEG, z, torch.zeros(1, 2), z + NEG, z, torch.zeros(1, 2))], "-> NaN, and the checker has no such case")

print("== check_kv_cache_append: wrong answers ==")
def strict_fit(buffer, length, new):  # grows when exactly full
    end = length + new.shape[2]
    if end >= buffer.shape[2]:
        bigger = buffer.new_empty(*buffer.shape[:2], 2 * end, buffer.shape[3]); bigger[:, :, :length] = buffer[:, :, :length]; buffer = bigger
    buffer[:, :, length:end] = new; return buffer
def default_dtype_device(buffer, length, new):  # torch.zeros without dtype= / device=
    end = length + new.shape[2]
    if end > buffer.shape[2]:
        bigger = torch.zeros(buffer.shape[0], buffer.shape[1], 2 * end, buffer.shape[3]); bigger[:, :, :length] = buffer[:, :, :length]; buffer = bigger
    buffer[:, :, length:end] = new; return buffer
def write_to_old(buffer, length, new):  # writes into the old buffer, returns the new one
    end = length + new.shape[2]
    if end > buffer.shape[2]:
        bigger = buffer.new_empty(*buffer.shape[:2], 2 * end, buffer.shape[3]); bigger[:, :, :length] = buffer[:, :, :length]
        buffer[:, :, length:min(end, buffer.shape[2])] = new[:, :, :buffer.shape[2] - length]; return bigger
    buffer[:, :, length:end] = new; return buffer
def grow_by_1_5(buffer, length, new):
    end = length + new.shape[2]
    if end > buffer.shape[2]:
        bigger = buffer.new_empty(*buffer.shape[:2], max(end, int(1.5 * buffer.shape[2])), buffer.shape[3]); bigger[:, :, :length] = buffer[:, :, :length]; buffer = bigger
    buffer[:, :, length:end] = new; return buffer
def grow_exact(buffer, length, new):  # grows to exactly what is needed
    end = length + new.shape[2]
    if end > buffer.shape[2]:
        bigger = buffer.new_empty(*buffer.shape[:2], end, buffer.shape[3]); bigger[:, :, :length] = buffer[:, :, :length]; buffer = bigger
    buffer[:, :, length:end] = new; return buffer
def returns_none(buffer, length, new):
    buffer[:, :, length:length + new.shape[2]] = new
for f in (strict_fit, default_dtype_device, write_to_old, grow_by_1_5, grow_exact, returns_none):
    run(exercises.check_kv_cache_append, f, f.__name__)
print("== check_kv_cache_append: correct variants ==")
def copy_whole(buffer, length, new):
    end = length + new.shape[2]
    if end > buffer.shape[2]:
        bigger = buffer.new_zeros(*buffer.shape[:2], 2 * buffer.shape[2], buffer.shape[3]); bigger[:, :, :buffer.shape[2]] = buffer; buffer = bigger
    buffer[:, :, length:end] = new; return buffer
def cat_doubling(buffer, length, new):
    end = length + new.shape[2]
    if end > buffer.shape[2]:
        buffer = torch.cat([buffer, torch.empty_like(buffer)], dim=2)
    buffer[:, :, length:end].copy_(new); return buffer
def narrow_copy(buffer, length, new):
    end = length + new.shape[2]
    if end > buffer.shape[2]:
        bigger = torch.empty((*buffer.shape[:2], 2 * end, buffer.shape[3]), dtype=buffer.dtype, device=buffer.device)
        bigger.narrow(2, 0, length).copy_(buffer.narrow(2, 0, length)); buffer = bigger
    buffer.narrow(2, length, new.shape[2]).copy_(new); return buffer
for f in (copy_whole, cat_doubling, narrow_copy):
    run(exercises.check_kv_cache_append, f, f.__name__)
