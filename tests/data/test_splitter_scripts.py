"""The sentence splitter on paragraphs in several scripts, each against a hand-checked list of sentences (the English
rules themselves are tested in test_data_readers.py). The texts are written for these tests."""

import pytest

from litebert.data.splitter import split_sentences

ENGLISH = ("Mr. Brown paid $3.14 for tea. Then he left, i.e. he went home… Was it late? It was 9 p.m. Really! "
           '"Yes." She nodded.')
ENGLISH_SENTENCES = ["Mr. Brown paid $3.14 for tea.", "Then he left, i.e. he went home…", "Was it late?",
                     "It was 9 p.m. Really!", '"Yes."', "She nodded."]

# Cyrillic capitals start sentences; initials (А. С.), dotted abbreviations (т.е.), listed ones (рис., стр.) do not end
# them; "г." before a lower-case word does not either.
RUSSIAN = ("Привет! Меня зовут А. С. Иванов. Я живу в Москве, т.е. в столице. Это большой город… А ты где живёшь? "
           "В 2020 г. я переехал. Подробности см. рис. 3 на стр. 5. Спасибо.")
RUSSIAN_SENTENCES = ["Привет!", "Меня зовут А. С. Иванов.", "Я живу в Москве, т.е. в столице.", "Это большой город…",
                     "А ты где живёшь?", "В 2020 г. я переехал.", "Подробности см. рис. 3 на стр. 5.", "Спасибо."]

# Devanagari has no case: the danda ends a sentence, and so do ! ? before any Devanagari letter; "डॉ." (Dr.) does not.
HINDI = ("नमस्ते! मेरा नाम राम है। मैं दिल्ली में रहता हूँ। क्या आप भारत के प्रधानमंत्री को जानते हैं? "
         "डॉ. शर्मा ने कहा कि कल बारिश होगी॥ यह अंत है।")
HINDI_SENTENCES = ["नमस्ते!", "मेरा नाम राम है।", "मैं दिल्ली में रहता हूँ।", "क्या आप भारत के प्रधानमंत्री को जानते हैं?",
                   "डॉ. शर्मा ने कहा कि कल बारिश होगी॥", "यह अंत है।"]

# Arabic: the Latin full stop and exclamation mark before an Arabic letter, the Arabic question mark; a year.
ARABIC = "مرحبا! كيف حالك؟ أنا بخير. ذهبت إلى المدرسة في عام 2020. هل تحب القراءة؟ نعم"
ARABIC_SENTENCES = ["مرحبا!", "كيف حالك؟", "أنا بخير.", "ذهبت إلى المدرسة في عام 2020.", "هل تحب القراءة؟", "نعم"]

# No spaces between sentences; a quotation closed inside a sentence and an ellipsis do not end it.
CHINESE = "我很好。你呢？今天天气很好！他说：“我们走吧。”然后我们走了。他想了想……没说话。"
CHINESE_SENTENCES = ["我很好。", "你呢？", "今天天气很好！", "他说：“我们走吧。”然后我们走了。", "他想了想……没说话。"]

# 「…。」 followed by と continues the sentence; followed by another 「 it is a sentence of its own.
JAPANESE = "こんにちは。私は学生です！「ありがとう。」と彼は言った。「はい。」「いいえ。」明日は雨ですか？"
JAPANESE_SENTENCES = ["こんにちは。", "私は学生です！", "「ありがとう。」と彼は言った。", "「はい。」",
                      "「いいえ。」明日は雨ですか？"]


@pytest.mark.parametrize("text, expected", [
    (ENGLISH, ENGLISH_SENTENCES),
    (RUSSIAN, RUSSIAN_SENTENCES),
    (HINDI, HINDI_SENTENCES),
    (ARABIC, ARABIC_SENTENCES),
    (CHINESE, CHINESE_SENTENCES),
    (JAPANESE, JAPANESE_SENTENCES),
], ids=["english", "russian", "hindi", "arabic", "chinese", "japanese"])
def test_paragraphs(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize("text, expected", [
    # every script in one paragraph: a CJK full stop needs no space before the Arabic that follows
    ("He said hello. Привет! नमस्ते। 你好。مرحبا؟ OK... done. Fine.",
     ["He said hello.", "Привет!", "नमस्ते।", "你好。", "مرحبا؟", "OK... done.", "Fine."]),
    ("Урду: یہ میری کتاب ہے۔ وہ اس کا قلم ہے۔", ["Урду: یہ میری کتاب ہے۔", "وہ اس کا قلم ہے۔"]),  # Urdu full stop
    ("ሰላም ነው። ደህና ነኝ።", ["ሰላም ነው።", "ደህና ነኝ።"]),  # Ethiopic full stop
    ("Γεια σου. Τι κάνεις;", ["Γεια σου.", "Τι κάνεις;"]),  # a Greek capital
    ("Hola. ¿Qué tal? ¡Bien!", ["Hola.", "¿Qué tal?", "¡Bien!"]),  # Spanish opening marks
    ("「はい。」 次です。", ["「はい。」", "次です。"]),  # a closing bracket, then a space
    ("पाठ ॥१॥ अगला है।", ["पाठ ॥१॥", "अगला है।"]),  # a danda needs a space after it: verse numbers stay
    ("Он сказал: «Иди!» И ушёл.", ["Он сказал: «Иди!»", "И ушёл."]),  # closing guillemet kept
    ("это т. е. пример. а дальше", ["это т. е. пример. а дальше"]),  # lower-case Cyrillic starts nothing
])
def test_mixed_and_edge_cases(text, expected):
    assert split_sentences(text) == expected
