import unittest

from wordfreq import top, words


class WordsTest(unittest.TestCase):
    def test_lower_cases_and_drops_punctuation_and_digits(self):
        self.assertEqual(words("The cat, THE hat; 42 cats!"),
                         ["the", "cat", "the", "hat", "cats"])

    def test_keeps_apostrophes_inside_words(self):
        self.assertEqual(words("don't 'quote'"), ["don't", "quote"])

    def test_unicode_letters(self):
        self.assertEqual(words("Ærlig talt, blåbær og pão"),
                         ["ærlig", "talt", "blåbær", "og", "pão"])


class TopTest(unittest.TestCase):
    def test_most_frequent_first(self):
        self.assertEqual(top("b a b c b a", 2), [("b", 3), ("a", 2)])

    def test_ties_in_order_of_first_appearance(self):
        self.assertEqual(top("y x z", 3), [("y", 1), ("x", 1), ("z", 1)])

    def test_empty_text(self):
        self.assertEqual(top(""), [])

    def test_negative_n_is_refused(self):
        with self.assertRaises(ValueError):
            top("a", -1)


if __name__ == "__main__":
    unittest.main()
