"""Export scikit-learn's bundled 8x8 handwritten digits (UCI, 1,797 images) once, in a fixed
shuffled order, for the `train_digits` example and its tests (which never need Python).

    pip install scikit-learn numpy && python3 graph-examples/data/export_digits.py

Writes digits_images.npy (float32 [1797, 64], pixel values 0..16) and digits_labels.npy
(int32 [1797]) next to this script. The first 1,437 images are the training set and the last
360 the test set (a 80/20 split, stratification not enforced).
"""

import os

import numpy as np
from sklearn.datasets import load_digits

here = os.path.dirname(os.path.abspath(__file__))
d = load_digits()
order = np.random.default_rng(20261203).permutation(len(d.target))
images = d.data[order].astype(np.float32)
labels = d.target[order].astype(np.int32)
assert images.shape == (1797, 64) and images.min() == 0 and images.max() == 16
np.save(os.path.join(here, "digits_images.npy"), images)
np.save(os.path.join(here, "digits_labels.npy"), labels)
print("wrote", images.shape, labels.shape, "class counts", np.bincount(labels))
