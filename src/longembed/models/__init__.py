"""Model code longembed ships: JinaBERT (``jina_bert``) and its config (``configuration_jina_bert``, apart
so that reading a config imports no modeling code)."""
