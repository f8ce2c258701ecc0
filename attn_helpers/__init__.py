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

# chapters 2-3 exports

# chapters 4-5 exports
from .modules import MultiHeadAttention, SelfAttentionHead

# chapters 6-7 exports
