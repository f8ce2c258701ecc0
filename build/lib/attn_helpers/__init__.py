"""attn_helpers: the code the chapters of *Self-attention from scratch* share.

One module per idea: ``attention`` (softmax, scaled dot-product attention), ``glove``
(word vectors with torchtext's interface), ``download``, ``plotting`` and ``checks``
(self-checks for the exercises); later chapters add their own modules below.
"""

from . import checks
from .attention import attention, softmax
from .download import download_glove
from .glove import GloVe, GloVeDataError, OutOfVocabularyError, cosine_similarity, tokenize
from .plotting import plot_attention, plot_heads
from .tables import table

# chapters 2-3 exports
from .explore import (
    ODYSSEY, ORDER, SentenceAttention, attend_sentence, draw_sentence, sentence_explorer, temperature_slider,
    temperature_weights, weights_table,
)
from .scaling import dot_product_variance, entropy, plot_curves, plot_temperature, saturation_curves, softmax_jacobian

# chapters 4-5 exports
from .modules import MultiHeadAttention, SelfAttentionHead

# chapters 6-7 exports
from .cost import (
    TensorMemoryTracker, loglog_slope, loop_attention, measure_memory, measure_time, peak_tensor_memory, plot_loglog,
    time_call,
)
from .masks import MASK_CONVENTIONS, causal_mask, convert_mask, padding_mask
from .torch_compat import copy_from_torch_mha, copy_to_torch_mha, from_torch_mha, to_torch_mha
