# ruff: noqa
md(r"""
# Every piece in one small language model

Twelve chapters built attention one piece at a time, and checked each piece on a task made for it: copying, looking two
back, recalling a key. This chapter puts the pieces together in a model that learns a real text. It is a decoder-only
language model over the characters of Shakespeare's plays, assembled from the book's own functions, trained on a CPU
in about a minute, and then checked from the inside. By the end of it you will be able to:

- load a text shipped with the book, check it against its checksum, read it as characters, and compute the losses of
  the two simplest models a language model must beat, the unigram and the bigram;
- assemble a decoder-only model from the parts of chapters 4 to 10 and say which chapter each line comes from;
- train it, read its loss curve against those baselines, and compare the text it writes before and after training;
- generate through chapter 9's KV cache, chapter 10's tiles and chapter 12's speculative decoding, and check that
  each gives what the plain computation gives;
- open the trained model's heads: draw them, ask which look at the previous character and which look where an earlier
  copy of the text continues, and measure what each head is worth.
""")

code(r"""
import math

import matplotlib.pyplot as plt
import torch
from IPython.display import clear_output
from myst_nb import glue

import attn_helpers as ah
from attn_helpers import language_model, lm_heads, text
from attn_helpers.checks import ch13 as check

%config InlineBackend.figure_formats = ["retina"]  # figures drawn at twice the resolution: sharp on any screen

torch.set_printoptions(precision=4, sci_mode=False)
_ = torch.manual_seed(0)
""")

md(r"""
## A real text, one character at a time

The book ships one text for this chapter, `data/tinyshakespeare.txt`: about 40,000 lines of speeches from Shakespeare's
plays, each headed by its speaker's name, as Andrej Karpathy collected them for char-rnn. Shakespeare's words are in the
public domain; `data/PROVENANCE.md` says where the file comes from, and `text.load_shakespeare()` checks it against its
SHA-256 in `data/SHA256SUMS` before reading it, as chapter 3's loader checks GloVe's vectors.

The model reads **characters**, not words. A word-level model would need a vocabulary of tens of thousands of rows in
its embedding and its output layer, and would still meet words it has never seen; a subword tokenizer (byte-pair
encoding, as GPT models use) would have to be trained and shipped with the book. Characters need neither: the vocabulary
is the set of characters the text uses, every string of them can be encoded, and a loss per character can be compared
with nanoGPT's character-level model of the same text. The price is that the model must learn to spell before it can
learn words, and a window of a hundred characters holds only a couple of lines. The first 90% of the characters are for
training, the last 10% are held out for validation, as nanoGPT splits them.
""")

code(r"""
corpus = text.load_shakespeare()                         # checked against data/SHA256SUMS, then read
print(f"{corpus.vocab} characters: {corpus.chars!r}")
print(f"{len(corpus.train):,} characters to train on, {len(corpus.val):,} held out")
print()
print(corpus.decode(corpus.train[:150]))
glue("ch13_vocab", corpus.vocab, display=False)
glue("ch13_train_chars", f"{len(corpus.train):,}", display=False)
glue("ch13_val_chars", f"{len(corpus.val):,}", display=False)
""")

md(r"""
## What a model must beat

A language model gives a probability to each possible next character, and its loss on a character is
$-\log p(\text{the character that came})$, averaged over the held-out text (in nats: natural logarithms). Three models
need no training at all, and give the numbers to beat:

- **uniform**: every one of the {glue:text}`ch13_vocab` characters equally likely, a loss of
  $\log {glue:text}`ch13_vocab` = {glue:text}`ch13_uniform:.2f`$;
- **unigram**: each character as often as it occurs in the training text (a space is far likelier than a `Z`);
- **bigram**: each character as often as it follows the previous character in the training text (after `q`, nearly
  always `u`). This is the best a model can do that looks back one character and no further.

`text.ngram_loss(corpus, n)` counts them from the training text, adding one to every count so that no character gets
probability zero, and scores the validation text:
""")

code(r"""
baselines = {"uniform": math.log(corpus.vocab), "unigram": text.ngram_loss(corpus, 1),
             "bigram": text.ngram_loss(corpus, 2)}
for name, loss in baselines.items():
    print(f"{name:>8}: {loss:.2f} nats per character")
glue("ch13_uniform", round(baselines["uniform"], 2), display=False)
glue("ch13_unigram", round(baselines["unigram"], 2), display=False)
glue("ch13_bigram", round(baselines["bigram"], 2), display=False)
""")

md(r"""
The unigram model saves {glue:text}`ch13_uniform:.2f` − {glue:text}`ch13_unigram:.2f` nats by knowing which characters
are common, the bigram model most of a nat more by knowing the previous one. Everything a model gains below
{glue:text}`ch13_bigram:.2f` it must get from looking further back: from attention.

## The model, from the book's parts

The model is a stack of pre-LayerNorm blocks, as chapter 8 built them, around an attention layer in which every line
comes from an earlier chapter. `language_model.Attention` is chapter 9's `GroupedQueryAttention`, whose weights
$W_Q, W_K, W_V, W_O$ it inherits; its `forward` returns the attention weights as well, so that we can read them, and can
compute the heads in tiles:

<!-- listing: attn_helpers/language_model.py:Attention.forward -->
```python
b, t_new, _ = x.shape
h, g, d_k = self.num_heads, self.num_kv_heads, self.d_k
start = 0 if cache is None else len(cache)
positions = torch.arange(start, start + t_new)  # (t_new,): the new tokens come after the cached ones
q = self.W_q(x).view(b, t_new, h, d_k).transpose(1, 2)  # (b, h, t_new, d_k): chapters 4 and 5
k = self.W_k(x).view(b, t_new, g, d_k).transpose(1, 2)  # (b, g, t_new, d_k): g key heads, chapter 9
v = self.W_v(x).view(b, t_new, g, d_k).transpose(1, 2)  # (b, g, t_new, d_k)
q, k = rope(q, positions), rope(k, positions)  # chapter 8: rotated by position before caching
cache = KVCache(k, v) if cache is None else cache.extend(k, v)  # (b, g, t, d_k) each: chapter 9
mask = causal_mask(t_new, len(cache))  # (t_new, t): chapter 7, aligned bottom right as in chapter 9
if tiled:  # chapter 10: each query head meets its group's keys, 16 × 16 scores at a time
    shared_k, shared_v = (c.repeat_interleave(h // g, dim=1) for c in (cache.k, cache.v))  # (b, h, t, d_k)
    heads, weights = flash_forward(q, shared_k, shared_v, mask, block_q=16, block_k=16)[0], None
else:
    heads, weights = grouped_query_attention(q, cache.k, cache.v, mask)  # (b, h, t_new, d_k): chapter 9
return self.W_o(heads.transpose(1, 2).reshape(b, t_new, h * d_k)), cache, weights  # chapter 5
```

A block adds the layer's output to its input (the residual connection), then an MLP's, each after a LayerNorm, as in
chapter 8's `TransformerBlock`. The model embeds each character, runs the blocks, normalises once more and maps each
position to one score per character. There is no table of positions: RoPE gives every query and key its position inside
attention, so the model has no length built into its weights (chapter 11 showed what that does and does not buy past
the trained length). Its forward pass takes and returns one KV cache per layer, with the signature of chapter 9's
`TinyDecoder`, so chapter 9's `generate` and chapter 12's `speculative_generate` run it unchanged.

The sizes: width $d = 96$, four query heads of $d_k = 24$ sharing two key/value heads, two blocks. Before any training
its loss should be near the uniform guess, $\log {glue:text}`ch13_vocab`$, and its text noise:
""")

code(r"""
torch.manual_seed(0)                                     # the initial weights train_lm(seed=0) starts from
untrained = language_model.CharLM(corpus.vocab)          # d_model 96, 4 query heads, 2 key/value heads, 2 blocks
print(untrained.blocks[0])
n_params = sum(p.numel() for p in untrained.parameters())
start_loss = language_model.val_loss(untrained, corpus)  # 32 fixed windows of the validation text
assert abs(start_loss - baselines["uniform"]) < 0.1
print(f"{n_params:,} parameters; validation loss before training {start_loss:.2f} (uniform: {baselines['uniform']:.2f})")
glue("ch13_params", f"{n_params:,}", display=False)
""")

md(r"""
## Training in about a minute

`language_model.train_lm` trains it the way every model of the book trains, with chapter 4's `training.fit`: Adam, one
thread, a fresh batch each step. A batch is 16 windows of 128 characters cut at random places of the training text, and
the loss is the mean over all 16 × 128 positions of the loss of predicting the next character: every position is a
training example, which the causal mask makes honest (position $i$ sees characters $0 \dots i$ only). Each 50 steps it
measures the loss on 32 fixed windows of the validation text. 600 steps read {glue:text}`ch13_seen` characters, about
{glue:text}`ch13_epochs:.1f` times the training text. The progress bar counts the steps, and goes once they are done:
""")

code(r"""
result = language_model.train_lm(corpus, seed=0, progress=True)  # 600 steps, about 40 s on one thread
clear_output()                                           # the progress bar has done its job
model = result.model
seen = 600 * 16 * 128
glue("ch13_seen", f"{seen:,}", display=False)
glue("ch13_epochs", round(seen / len(corpus.train), 1), display=False)
""")

code(r"""
# This machine's losses: another CPU rounds the last bit of each step differently, and 600 steps of training carry
# that into the third decimal. The asserts state what held for ten seeds under four kernel sets.
final = result.val_losses[-1]
assert final < 1.95
assert baselines["bigram"] - final > 0.5
print(f"validation loss after training, this machine: {final:.3f} nats per character")
""", tags=["nbval-ignore-output"])

md(r"""
After 600 steps the validation loss is below 1.95 nats per character, more than half a nat below the bigram model's
{glue:text}`ch13_bigram:.2f` (both bounds held for ten seeds under four kernel sets; the cell above shows this
machine's value). nanoGPT's recipe for a CPU (four layers of width 128, context 64, 2,000 steps of 12 windows)
reaches about 1.88 in some three minutes on a laptop: a model of {glue:text}`ch13_params` parameters built from the
book's parts, trained for a third of the time, learns about as well. The curve shows where the loss went:
""")

code(r"""
fig, ax = plt.subplots(figsize=(6.5, 3.6))
steps = torch.arange(1, len(result.losses) + 1)
smooth = torch.tensor(result.losses).unfold(0, 25, 1).mean(dim=1)       # mean of 25 steps
ax.plot(steps[24:], smooth, color="tab:blue", label="training (mean of 25 steps)")
ax.plot([result.every * (i + 1) for i in range(len(result.val_losses))], result.val_losses, "o-", color="tab:orange",
        markersize=4, label="validation")
for (name, loss), style in zip(baselines.items(), (":", "--", "-.")):
    ax.axhline(loss, color="0.4", linestyle=style, linewidth=1)
    ax.text(600, loss + 0.04, name, ha="right", va="bottom", fontsize=9, color="0.3")
ax.set(xlabel="training step", ylabel="loss (nats per character)", ylim=(1.4, 4.4),
       title="The model against the counting baselines")
ax.legend(loc="center right", fontsize=9)
plt.show()
""", figure=("fig-ch13-loss", "Training and validation loss of the character model over 600 steps, against the losses of "
             "guessing uniformly, of character counts (unigram) and of counts of each character after the one before "
             "it (bigram). The model passes the bigram within the first hundred steps.",
             "A line plot of loss against training step: both curves fall from above 4 to below 2, crossing the "
             "horizontal uniform, unigram and bigram lines on the way."))

md(r"""
Before and after: the untrained model and the trained one, each continuing the same prompt with the character it finds
most likely, again and again (greedy decoding):
""")

code(r"""
# The trained model's text on this machine: its weights differ in their last bits on another CPU, and a near tie
# between two characters can go the other way and change the rest of the text. The assert holds everywhere.
prompt = corpus.encode(language_model.PROMPT)[None]      # (1, 7): "ROMEO:" and a new line
before, _ = untrained.generate(prompt, 120)
after, _ = model.generate(prompt, 120)
assert set(corpus.decode(after[0])) <= set(corpus.chars)
print("before training:", repr(corpus.decode(before[0, 7:])), "\n")
print("after training:")
print(corpus.decode(after[0]))
""", tags=["nbval-ignore-output"])

md(r"""
The untrained model repeats whatever character its random weights happen to favour. The trained one has learned the
shape of the text: a speaker's name opens a speech, lines end, words are spelled mostly right and are spaced like
English. Greedy decoding makes it loop on its likeliest phrases; drawing each character from the predicted
distribution instead, as the last exercise does, gives livelier text.

## Generating with the KV cache

`model.generate` is chapter 9's greedy loop. With `use_cache=True` (the default) each step runs the model on the newest
character only, with the keys and values of the earlier ones taken from the cache; with `use_cache=False` it runs the
whole text again at every step. The two must write the same text, and the logits from which they chose each character
must agree to float32's rounding:
""")

code(r"""
cached, cached_logits = model.generate(prompt, 120)                       # one character a pass
uncached, uncached_logits = model.generate(prompt, 120, use_cache=False)  # the whole text again, every pass
gap = (cached_logits - uncached_logits).abs().max()
assert torch.equal(cached, uncached) and gap < 1e-3
print("the same 120 characters with and without the cache:", torch.equal(cached, uncached))
""")

md(r"""
The largest difference between the two sets of logits is below $10^{-3}$ (the cell asserts it), on logits of size ten or
so: the cache changes the order of the sums, not their values.

## Tiled attention inside the model

With `tiled=True` every layer computes its heads with chapter 10's `flash_forward`, 16 × 16 scores at a time, never
holding a 128 × 128 matrix of weights. Each query head meets its group's keys, repeated for it. The model's logits on
16 held-out windows of 128 characters must be those of the plain pass:
""")

code(r"""
windows = lm_heads.held_out(corpus)                      # (16, 128): fixed windows of the validation text
with torch.no_grad():
    plain, _ = model(windows)                            # (16, 128, vocab)
    tiled, _ = model(windows, tiled=True)
assert torch.allclose(tiled, plain, atol=1e-3)
print("tiled and plain logits agree:", torch.allclose(tiled, plain, atol=1e-3))
""")

md(r"""
## Speculative decoding with a draft model

Chapter 12's speculative decoding needs a small draft model that guesses the target's next characters cheaply.
`language_model.train_draft` trains one the same way: one block of width 32, 300 steps. Its loss is worse, but
it often guesses what the target would write:
""")

code(r"""
draft = language_model.train_draft(corpus, seed=0, progress=True).model  # 1 block of width 32, 300 steps
clear_output()                                           # the progress bar has done its job
n_draft = sum(p.numel() for p in draft.parameters())
glue("ch13_draft_params", f"{n_draft:,}", display=False)
print(f"draft: {n_draft:,} parameters")
""")

md(r"""
`language_model.speculate(model, draft, corpus)` writes 120 characters after the prompt with
`ah.speculative.speculative_generate`, 4 guesses a round, and compares them with the target's own greedy text. With
greedy decoding the result must be exactly the target's text, whatever the draft guesses; the draft only saves passes
of the target when its guesses are accepted.
""")

code(r"""
spec = language_model.speculate(model, draft, corpus)    # 120 characters, 4 guesses a round
assert spec.same
assert spec.acceptance > 0.3
assert spec.target_passes < 0.7 * spec.greedy_passes
print("the target's own greedy text:", spec.same)
""")

code(r"""
# This machine's counts: they depend on the trained weights of both models (see the training above). The asserts
# above state what held for ten seeds under four kernel sets.
print(f"drafted characters accepted, this machine: {spec.acceptance:.0%}")
print(f"target passes: {spec.greedy_passes} alone, {spec.target_passes} with the draft")
""", tags=["nbval-ignore-output"])

md(r"""
The text is the target's own, and for ten seeds under four kernel sets the target accepted more than 30% of the
drafted characters and ran fewer than 70% of the passes it needs alone. A pass of the target over 5 characters costs
more than a pass over one, but on a CPU with so small a model, each pass is dominated by its fixed costs; on a GPU a
pass over a handful of tokens costs about as much as over one, which is where the saving is real (chapter 12).

## What the heads look at

The model has 2 layers of 4 heads. Chapter 8 asked of its two-layer model whether one head looks at the previous token
and another at the token after an earlier copy of the current one, an induction head. Here is the same question, asked
of a model trained on a real text rather than on a task built for copying. First, the weights of every head on a
held-out passage:
""")

code(r"""
passage = windows[:1, :40]                               # (1, 40): the start of a held-out window
weights = model.attention_weights(passage)               # per layer: (1, h, 40, 40)
labels = [repr(c)[1:-1] or " " for c in corpus.decode(passage[0])]
fig, axes = plt.subplots(4, 2, figsize=(7, 13.5))
for layer, w in enumerate(weights):
    for head in range(w.shape[1]):
        ax = axes[head, layer]
        ax.imshow(w[0, head], cmap="Blues", vmin=0, vmax=1)
        ax.set_title(f"layer {layer + 1}, head {head}", fontsize=10)
        ax.set_xticks(range(0, 40, 4), labels[::4], fontsize=7)
        ax.set_yticks(range(0, 40, 4), labels[::4], fontsize=7)
        ax.set(xlabel="key" if head == 3 else None, ylabel="query" if layer == 0 else None)
fig.tight_layout()
plt.show()
""", figure=("fig-ch13-heads", "Attention weights of the trained model's eight heads on the first 40 characters of a "
             "held-out window (dark: weight near 1). Each row is a query; the causal mask leaves the upper triangle "
             "empty.",
             "Eight 40 by 40 heatmaps, two columns for the two layers and four rows for the heads, most with a dark "
             "line just below the diagonal or dark columns at spaces and line breaks."))

md(r"""
The explorer below shows the same weights one head and one query at a time: pick a layer, a head and a query, and read
which characters that query weighs, and how much.
""")

code(r"""
lm_heads.heads_explorer(weights, labels)
""")

md(r"""
Pictures suggest; measurements decide. `lm_heads.previous_token_scores` gives each head's mean weight from each query to
the key just before it, over the 16 held-out windows; a head that looks only one character back scores 1, and a head
that spreads its weight evenly over a window scores about $\ln(128)/128 \approx 0.04$.
""")

code(r"""
previous = lm_heads.previous_token_scores(model, windows)  # rows: layers; columns: heads
best_previous = previous.max().max()
assert best_previous > 0.5
ah.table(previous.round(1))
""")

md(r"""
For ten seeds under four kernel sets, some head put more than half of its weight on the previous character (the table
shows this machine's heads at one decimal; the assert holds for all of them). So the model has a **previous-token
head**, as chapter 8's did. Now the induction question: write a held-out passage of 64 characters twice, and ask of
each head in the second copy how much weight it gives to the character just after the current character's earlier
copy, where an induction head looks (`lm_heads.induction_scores`). A head that does not care scores about 1/64 to
1/128.
""")

code(r"""
twice = lm_heads.repeated(corpus)                        # (16, 128): 16 held-out passages of 64, each written twice
induction = lm_heads.induction_scores(model, twice)
best_induction = induction.max().max()
assert best_induction > 0.3
ah.table(induction.round(1))
""")

md(r"""
And a head that copies should make the second copy easy to predict. The loss of the model on each copy:
""")

code(r"""
with torch.no_grad():
    logits, _ = model(twice[:, :-1])                       # (16, 127, vocab): predict characters 1 … 127
per_char = torch.nn.functional.cross_entropy(logits.transpose(1, 2), twice[:, 1:], reduction="none")  # (16, 127)
first_copy, second_copy = per_char[:, :63].mean().item(), per_char[:, 64:].mean().item()
assert second_copy < first_copy / 2
print("loss on the first copy is more than twice the loss on the second:", second_copy < first_copy / 2)
""")

md(r"""
For ten seeds under four kernel sets, some layer-2 head put more than 0.3 of its weight on the character after the
earlier copy, and the loss on the second copy was less than half the loss on the first: the trained model copies from
its context, and has an **induction-like head** that does it. What the measurements do not show is *how* it finds the
place: chapter 8 read that from the weights of a two-layer model without MLPs, and here the MLPs and the shared key heads
make the reading harder. The head could be matching more than the one previous character.

Finally, how much does each head matter? `lm_heads.ablation_losses` removes one head at a time (its columns of $W_O$
set to zero, in a copy of the model) and measures how much the validation loss rises:
""")

code(r"""
# This machine's rises in loss: they depend on the trained weights (see the training above). The asserts state what
# held for ten seeds under four kernel sets.
rises = lm_heads.ablation_losses(model, corpus)
assert rises.max().max() > 0.05
assert rises.min().min() > -0.02
ah.table(rises.round(3))
""", tags=["nbval-ignore-output"])

md(r"""
No head can be removed for free, and none is the whole model: for ten seeds under four kernel sets the costliest head
raised the loss by more than 0.05 nats, and no removal lowered it by more than 0.02. The exercises remove heads
themselves.

## Summary

- A **character-level** model needs no tokenizer: its vocabulary is the {glue:text}`ch13_vocab` characters of the
  text. Counting gives the baselines to beat: {glue:text}`ch13_uniform:.2f` nats per character for a uniform guess,
  {glue:text}`ch13_unigram:.2f` for character counts, {glue:text}`ch13_bigram:.2f` for counts of each character after
  the previous one.
- The **model** is the book's parts put together: projections split into heads (chapters 4 and 5), RoPE (chapter 8),
  the causal mask (chapter 7), grouped-query attention and its KV cache (chapter 9), pre-LayerNorm residual blocks
  (chapter 8). {glue:text}`ch13_params` parameters, trained for 600 steps of Adam on one CPU thread, reach a validation
  loss below 1.95 for ten seeds under four kernel sets, more than half a nat below the bigram: about what nanoGPT's CPU
  recipe reaches on the same text.
- **Generation** runs through the book's inference code, and each path gives what the plain one gives: the KV cache
  the same greedy text (logits within $10^{-3}$), tiled attention the same logits within $10^{-3}$, and speculative
  decoding with a {glue:text}`ch13_draft_params`-parameter draft exactly the target's greedy text, with more than 30% of
  the drafts accepted and fewer than 70% of the target's passes.
- **The heads**, measured rather than guessed from pictures: a previous-token head and an induction-like head in every
  seed, as in chapter 8's toy model; the model copies a repeated passage at less than half the loss of its first
  reading; and every head's removal costs something, none everything.
""")

md(r"""
## Exercises

```{exercise} Predict, then run: the cache of a full window — easy
:label: ex-ch13-predict

The chapter's model has 2 layers, 4 query heads of $d_k = 24$ sharing 2 key/value heads, and keeps its cache in float32.
**Before running anything**, predict how many bytes its KV cache holds, over all layers, once it has read a window of
`check.CONTEXT` $= 64$ characters, and store the number as `cache_bytes`. Then check your prediction: run the model on 64
characters and weigh the caches it returns.
```
""")

md(r"""
```{solution-start} ex-ch13-predict
:class: dropdown
```
Each layer caches a key and a value for each of its $g = 2$ key/value heads (not the 4 query heads: that is what
grouped-query attention saves), each of $d_k = 24$ numbers of 4 bytes, for each of the 64 characters.
""")

code(r"""
cache_bytes = 2 * 2 * 2 * 24 * 4 * check.CONTEXT         # keys and values, layers, g heads, d_k, bytes, characters
with torch.no_grad():
    _, window_caches = model(windows[:1, :check.CONTEXT])
print(cache_bytes, sum(c.nbytes for c in window_caches))
""", tags=["solution"])

md(r"""
```{solution-end}
```
""")

code(r"""
check.cache_bytes(cache_bytes)
""")

md(r"""
```{exercise} What one head is worth — medium
:label: ex-ch13-ablate

Write `loss_without(model, corpus, layer, head)` that returns the validation loss (`language_model.val_loss`) of the
model with one head removed: layer `layer` counted from 1, as the chapter's tables count, and head `head` counted from 0.
A head is removed when what it adds to the residual stream is zero. Leave `model` itself unchanged, and do not call
`lm_heads.without_head` or `lm_heads.ablation_losses`. Which head of the chapter's model costs most?
```
""")

md(r"""
```{solution-start} ex-ch13-ablate
:class: dropdown
```
A head's output reaches the residual stream only through $W_O$: its $d_k$ features are columns
$i\,d_k \dots (i+1)\,d_k - 1$ of `W_o.weight` (`nn.Linear` computes $x W^\top$). Zero them in a copy.
""")

code(r"""
import copy


def loss_without(model, corpus, layer, head):
    ablated = copy.deepcopy(model)                       # the model itself stays whole
    attn = ablated.blocks[layer - 1].attn
    with torch.no_grad():
        attn.W_o.weight[:, head * attn.d_k:(head + 1) * attn.d_k] = 0
    return language_model.val_loss(ablated, corpus)


print(f"layer 1, head 0: {loss_without(model, corpus, 1, 0):.3f} nats per character")
""", tags=["solution"])

md(r"""
```{solution-end}
```
""")

code(r"""
check.loss_without_function(loss_without, model, corpus)
""")

md(r"""
```{exercise} Sampling through the cache — hard
:label: ex-ch13-sample

Greedy decoding loops. Write `sample(model, prompt, n_new, temperature, generator)` that writes `n_new` characters
after `prompt` ($(1, t)$ ids) by drawing each one from the model's distribution at a temperature: the softmax of the
last position's logits divided by `temperature`, drawn with `torch.multinomial(..., 1, generator=generator)`. It returns
the $(1, t + n\_new)$ ids, prompt first. Run the model once on the prompt, then once per new character on **that
character only**, passing the caches back (the check counts what each pass is given), and run no pass that is not
needed. Then print a few hundred characters at temperatures 0.5 and 1: which reads more like the play, and why does a
low temperature bring back the greedy loops?
```
""")

md(r"""
```{solution-start} ex-ch13-sample
:class: dropdown
```
The prompt's pass gives the logits of the first new character and the caches; each later pass takes the newest
character and the caches. A low temperature sharpens the distribution towards its most likely character, which is
greedy decoding in the limit; a temperature of 1 samples the model as trained, with its occasional misspellings.
""")

code(r"""
@torch.no_grad()
def sample(model, prompt, n_new, temperature, generator):
    logits, caches = model(prompt)                       # (1, t, vocab)
    tokens = prompt
    for i in range(n_new):
        probs = torch.softmax(logits[:, -1] / temperature, dim=-1)   # (1, vocab)
        new = torch.multinomial(probs, 1, generator=generator)        # (1, 1)
        tokens = torch.cat([tokens, new], dim=1)
        if i < n_new - 1:
            logits, caches = model(new, caches)          # the newest character only
    return tokens


for temperature in (0.5, 1.0):
    written = sample(model, prompt, 200, temperature, torch.Generator().manual_seed(0))
    print(f"--- temperature {temperature}\n{corpus.decode(written[0])}\n")
""", tags=["solution", "nbval-ignore-output"])

md(r"""
```{solution-end}
```
""")

code(r"""
check.sample_function(sample, model, prompt)
""")
