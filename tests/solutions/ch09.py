"""Chapter 9's exercises: BERT's 80/10/10 masking, mean pooling, distillation."""

import torch


def mlm_masking(input_ids, *, mask_id, vocab_size, special_ids, generator):
    never = torch.tensor([*special_ids, mask_id])
    special = torch.isin(input_ids, never)
    chosen = (torch.rand(input_ids.shape, generator=generator) < 0.15) & ~special  # 15% of tokens
    u = torch.rand(input_ids.shape, generator=generator)
    allowed = torch.tensor([i for i in range(vocab_size) if i not in never.tolist()])
    random_ids = allowed[torch.randint(len(allowed), input_ids.shape, generator=generator)]
    inputs = torch.where(chosen & (u < 0.8), torch.full_like(input_ids, mask_id), input_ids)
    inputs = torch.where(chosen & (u >= 0.8) & (u < 0.9), random_ids, inputs)  # 10% random
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))  # the ORIGINAL ids
    return inputs, labels


def masked_mean_pool(hidden, attention_mask):
    m = attention_mask.to(hidden.dtype)[..., None]  # (B, T, 1): 1 = a real token
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1)  # (B, d); a row of padding gives zeros


def distillation_loss(student_logits, teacher_logits, labels, temperature, alpha):
    t = temperature
    log_student = torch.log_softmax(student_logits / t, dim=-1)  # (N, C)
    log_teacher = torch.log_softmax(teacher_logits / t, dim=-1)  # (N, C)
    kl = (
        (log_teacher.exp() * (log_teacher - log_student)).sum(dim=-1).mean()
    )  # KL(teacher || student)
    hard = torch.nn.functional.cross_entropy(student_logits, labels)
    return alpha * t**2 * kl + (1 - alpha) * hard
