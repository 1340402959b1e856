import torch

from workers.rollout import completion_mask_from_eos, position_ids_from_mask


def test_completion_mask_keeps_tokens_through_first_eos():
    eos = 2
    ids = torch.tensor([[5, 6, 2, 0], [5, 2, 2, 0], [5, 6, 7, 8], [2, 0, 0, 0]])
    mask = completion_mask_from_eos(ids, eos)
    assert mask.tolist() == [[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]


def test_position_ids_ignore_left_padding():
    att = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    assert position_ids_from_mask(att).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]
